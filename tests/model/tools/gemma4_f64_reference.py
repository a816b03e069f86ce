#!/usr/bin/python3
# A float64 forward of tq-arch-gemma4-text written from Hugging Face's Gemma4 text model
# (embedding x sqrt(hidden); per-layer inputs: embedding x sqrt(d) plus the normed projection of
# the embedded input, / sqrt(2); per layer: sandwich-normed attention with q/k/v norms, scale 1,
# sliding window or proportional partial RoPE, GELU-tanh MLP, the gated per-layer-input branch,
# the layer scalar; final norm, tied head, soft-cap 30), compared with golden.safetensors.
# It measures how far fp32 rounding alone moves this model's logits (the tolerance of
# tests/model/arch_golden_test.cc's order checks): prints max |f64 - golden| / max |golden|.
#   /usr/bin/python3 tests/model/tools/gemma4_f64_reference.py [ARCH_DIR] [OUT.npy]
import json, struct, numpy as np, sys
D=(sys.argv[1] if len(sys.argv)>1 else '../shared/models/arch/tq-arch-gemma4-text').rstrip('/')+'/'
def load(f):
    raw=open(D+f,'rb').read(); n=struct.unpack('<Q',raw[:8])[0]; h=json.loads(raw[8:8+n]); out={}
    for k,v in h.items():
        if k=='__metadata__': continue
        a,b=v['data_offsets']; buf=raw[8+n+a:8+n+b]
        if v['dtype']=='BF16': x=(np.frombuffer(buf,np.uint16).astype(np.uint32)<<16).view(np.float32)
        elif v['dtype']=='F32': x=np.frombuffer(buf,np.float32)
        elif v['dtype']=='I32': x=np.frombuffer(buf,np.int32)
        out[k]=x.reshape(v['shape']).astype(np.float64 if v['dtype']!='I32' else np.int64)
    return out
W=load('model.safetensors'); G=load('golden.safetensors'); C=json.load(open(D+'config.json'))
ids=G['input_ids']; n=len(ids); H=C['hidden_size']; L=C['num_hidden_layers']; d=C['hidden_size_per_layer_input']
eps=C['rms_norm_eps']; nh=C['num_attention_heads']; nkv=C['num_key_value_heads']
def rms(x,w=None):
    y=x*np.power((x*x).mean(-1,keepdims=True)+eps,-0.5)
    return y*w if w is not None else y
def gelu(x): return 0.5*x*(1+np.tanh(np.sqrt(2/np.pi)*(x+0.044715*x**3)))
def lin(x,name): return x@W[name].T
x=W["model.embed_tokens.weight"][ids]*np.float64(np.float32(H**0.5))
ple=W['model.embed_tokens_per_layer.weight'][ids]*np.sqrt(d)
ple=ple.reshape(n,L,d)
proj=(lin(x,'model.per_layer_model_projection.weight')*H**-0.5).reshape(n,L,d)
proj=rms(proj,W['model.per_layer_projection_norm.weight'])
ple=(proj+ple)*2**-0.5
pos=np.arange(n)
def rope(t,inv):  # t [n,h,hd], rotate_half with cos/sin of cat(freqs,freqs)
    fr=pos[:,None]*inv[None,:]; emb=np.concatenate([fr,fr],-1); c=np.cos(emb)[:,None,:]; s=np.sin(emb)[:,None,:]
    half=t.shape[-1]//2; rh=np.concatenate([-t[...,half:],t[...,:half]],-1)
    return t*c+rh*s
for l in range(L):
    p=f'model.layers.{l}.'
    typ=C['layer_types'][l]; sliding= typ=='sliding_attention'
    hd=int(C.get('per_layer_config',{}).get(str(l),{}).get('head_dim',C['head_dim']))
    rp=C['rope_parameters'][typ]
    if rp['rope_type']=='proportional':
        ang=int(rp['partial_rotary_factor']*hd//2)
        inv=1.0/(rp['rope_theta']**(np.arange(0,2*ang,2)/hd)); inv=np.concatenate([inv,np.zeros(hd//2-ang)])
    else:
        inv=1.0/(rp['rope_theta']**(np.arange(0,hd,2)/hd))
    res=x; h=rms(x,W[p+'input_layernorm.weight'])
    q=lin(h,p+'self_attn.q_proj.weight').reshape(n,nh,hd); q=rms(q,W[p+'self_attn.q_norm.weight']); q=rope(q,inv)
    k=lin(h,p+'self_attn.k_proj.weight').reshape(n,nkv,hd); k=rms(k,W[p+'self_attn.k_norm.weight']); k=rope(k,inv)
    v=lin(h,p+'self_attn.v_proj.weight').reshape(n,nkv,hd); v=rms(v)
    g=nh//nkv; out=np.zeros((n,nh,hd))
    for i in range(n):
        lo=max(0,i-C['sliding_window']+1) if sliding else 0
        for hh in range(nh):
            sc=k[lo:i+1,hh//g,:]@q[i,hh]
            pr=np.exp(sc-sc.max()); pr/=pr.sum(); out[i,hh]=pr@v[lo:i+1,hh//g,:]
    a=lin(out.reshape(n,nh*hd),p+'self_attn.o_proj.weight'); a=rms(a,W[p+'post_attention_layernorm.weight'])
    x=res+a; res=x
    h=rms(x,W[p+'pre_feedforward_layernorm.weight'])
    m=lin(gelu(lin(h,p+'mlp.gate_proj.weight'))*lin(h,p+'mlp.up_proj.weight'),p+'mlp.down_proj.weight')
    m=rms(m,W[p+'post_feedforward_layernorm.weight']); x=res+m
    res=x; t=gelu(lin(x,p+'per_layer_input_gate.weight'))*ple[:,l,:]
    t=rms(lin(t,p+'per_layer_projection.weight'),W[p+'post_per_layer_input_norm.weight']); x=res+t
    x=x*W[p+'layer_scalar'][0]
x=rms(x,W['model.norm.weight']); lg=x@W['model.embed_tokens.weight'].T
cap=C['final_logit_softcapping']; lg=np.tanh(lg/cap)*cap
gold=G['logits']; print('max abs err', np.abs(lg-gold).max(), 'scale', np.abs(gold).max(), 'rel', np.abs(lg-gold).max()/np.abs(gold).max())
if len(sys.argv)>2: np.save(sys.argv[2], lg)
